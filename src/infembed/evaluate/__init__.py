"""Evaluation: metrics (p-MRR, MAP/nDCG), retrievers (BM25, dense) behind one protocol, the runner, reports."""
