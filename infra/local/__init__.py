"""The local stack's fidelity to the deployed one: what `sam deploy` would make of template.yaml
(`deployment`), and the template's IAM policies enforced on every local request (`iam`)."""
