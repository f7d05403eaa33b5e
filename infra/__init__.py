"""CDK constructs and the stack of trainsweep (no business logic: that lives in ``trainsweep``)."""
