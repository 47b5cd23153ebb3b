"""What a user declares and calls: ``@step``/``@workflow``, the step registry, the workflow
API (``sleep``, ``gather``, hooks, children) and definition identity."""
