"""actions.

Floor: actions (the work, typed results).
"""
