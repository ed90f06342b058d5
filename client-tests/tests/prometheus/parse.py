"""Parses Prometheus' text format on stdin with the Prometheus Python
client's own parser and prints its families as JSON: name, type, and
samples as [name, labels, value] (a value that is not a number as a string)."""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def value(v):
    return v if math.isfinite(v) else str(v)


families = [
    {
        "name": f.name,
        "type": f.type,
        "samples": [[s.name, s.labels, value(s.value)] for s in f.samples],
    }
    for f in text_string_to_metric_families(sys.stdin.read())
]
json.dump(families, sys.stdout)
