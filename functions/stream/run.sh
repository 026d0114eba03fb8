#!/bin/sh
# The stream function's handler setting. The Lambda Web Adapter's wrapper (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap)
# runs this instead of the Python runtime's bootstrap: it starts the web server the adapter forwards
# invocations to (server.py, on AWS_LWA_PORT). The runtime layer (missions and its dependencies) is in /opt/python.
cd "$(dirname "$0")" || exit 1
PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/opt/python${LAMBDA_RUNTIME_DIR:+:$LAMBDA_RUNTIME_DIR}" exec python -m server
