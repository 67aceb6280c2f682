"""judges: LLM and lexical judges, prompts, the judge cache, one case's verdicts, calibration (the judge check,
`rageval calibrate`, stored calibrations), the judge reliability spot check and the judges of the
``pytest_rageval_judges`` hook (external_judges).

Imports the foundations and evaluation; no pytest. The judge a session's settings ask for is built in
engine/judge_factory.py.
"""
