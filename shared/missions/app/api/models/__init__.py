"""The API's contract, one module per resource: what each request body may hold (strict: no "yes" for a
boolean, no number for a string) and what each response holds. The OpenAPI document is generated from
these models, and the suite checks every response it sees against that document
(tests/support/contract.py). `common` holds every body's base and the one error shape."""
