"""The project's tests, a regular package on purpose.

ebmlite (the Connect consumer's Matroska library) ships a top-level ``tests`` package in its wheel.
A regular package anywhere on ``sys.path`` beats a namespace package, so without this file ``import
tests.bridge...`` would find ebmlite's ``tests`` in site-packages and every test that imports a
shared test kit would fail to collect.
"""
