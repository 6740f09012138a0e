import sys

from .cli import main

if __name__ == "__main__":  # `python -m omtl`; importing the module (documentation tools do) runs nothing
    sys.exit(main())
