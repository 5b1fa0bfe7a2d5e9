"""Configuration review: what ``stanpkg validate`` finds, in the formats review tools read
(SARIF, GitHub workflow commands, GitLab Code Quality), ``stanpkg diff`` of two resolved
plans, and ``stanpkg validate --against`` of a new plan with a running server's data.

It sits beside ``cli`` (layer 7): the plan layer below knows nothing of review tools, and
the live check reads the server only through its monitoring endpoints (and, for message
ages, as a STAN client), like any other tool would.
"""
