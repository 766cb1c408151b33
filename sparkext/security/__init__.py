"""Who may do what, and a record of what was done: serve's password file, the routine policy, the
audit log. ``caller`` says who runs the current statement on every route.

Floor: security.
"""
