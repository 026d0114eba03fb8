"""How missions start without a person: declared triggers, what the stack deploys for them, users' schedules."""
