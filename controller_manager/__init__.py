"""kubelite's controller-manager: controllers that turn desired state into objects, on one
shared informer factory (common.informer), as kube-controller-manager.

Reading order: `__main__` (flags) → `app` (leader election, the endpoint, which
controllers run) → one module per controller (`nodelifecycle`, `tainteviction`, ...), each
with its pure decisions first and a thin async shell after them; `controller.run_workers`
is the work-queue loop they share.
"""
