"""From a kernel's output to a verdict: the judge against the oracle and its derived bound, invariances measured,
and a judgement turned into the report's record."""
