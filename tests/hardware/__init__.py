"""Tests of ctxplan.hardware."""
