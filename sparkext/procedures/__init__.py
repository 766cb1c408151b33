"""Procedures and table functions: one module each, declared as data, listed in registry.py.

Floor: procedures (the SQL façade of an action).
"""
