"""missions: a serverless runtime for long-running LLM missions on AWS Step Functions."""

__version__ = "0.1.0"
