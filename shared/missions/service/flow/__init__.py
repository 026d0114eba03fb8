"""Flow control: what happens when missions are asked for faster than a user may run or pay for them.

The launcher consults it as every mission starts (missions.service.launcher); the stages consult it as
they spend (missions.service.runner). `budgets`: a user's daily budget in dollars.
"""
