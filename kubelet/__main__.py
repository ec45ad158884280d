"""`python -m kubelet --apiserver URL --node-name NAME ...`"""

from kubelet.main import main

if __name__ == "__main__":
    main()
