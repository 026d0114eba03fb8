"""Model servers and model clients the tests talk to: fakes of OpenAI and Anthropic, recorded answers, a flaky model."""
