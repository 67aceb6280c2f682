"""evaluation: the eval-set model and loader, the case record's shape, metrics, thresholds, repeats, the config
matrix, gold reachability and gold labelling.

Pure: imports only the foundations (the top-level modules); no pytest.
"""
