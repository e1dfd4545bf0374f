"""How built envs are kept on disk: files shared by content (``filestore``), instance venvs as hard-linked clones of
their version's venv (``venv_clones``), git history shared between testbeds (``gitpacks``), build output no test
reads taken out (``slim``), finished envs packed into read-only images (``packing``, ``pack_images``) and the disk
they take (``disk_usage``)."""
