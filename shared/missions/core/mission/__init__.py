"""What a mission is made of: the envelope and its offload, bounds, status, events, requests, checkpoints."""
