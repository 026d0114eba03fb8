"""Missions that start without a person: webhooks, bus events, schedules, memory changes."""
