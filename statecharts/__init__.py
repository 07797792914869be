"""Orion's built-in statecharts, shipped as package data (the YAML files beside this one)."""
