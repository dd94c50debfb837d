"""Local stack and developer tools: nothing here is deployed."""
