"""Command-line entry points: sparkext-sql (shell) and sparkext-demo.

Floor: top (command line).
"""
