"""What a mission costs: model list prices, per-call usage records, infrastructure at list prices."""
