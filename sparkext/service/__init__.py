"""The optimisation service: table leases, the job queue, the run log, the service loop and
the health report (issue 19).

Floor: service.
"""
