"""Tools the model can call: specs, advertising and authorization."""
