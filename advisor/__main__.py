"""``python -m advisor`` runs the command line."""

from advisor.cli import main

if __name__ == "__main__":  # not when imported again as __mp_main__ by a spawned process (Dask's LocalCluster workers)
    main()
