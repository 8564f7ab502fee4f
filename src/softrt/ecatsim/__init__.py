"""The virtual EtherCAT segment: N simulated slaves answering real frames (the slave side of the wire).

softrt's master (:mod:`softrt.ethercat`) and this simulator meet only on the wire: the simulator
imports the protocol modules it shares with the master (frames, AL states, SII, device
descriptions, DC registers) from :mod:`softrt.ethercat`, and the master never imports the simulator
(``tests/test_layers.py``). Tests also drive it with pysoem directly, so it is checked against a
master we did not write.

Layers (each imports only those above it)::

    cia402, coe, faults, dc   pure models: CiA 402 drive, CoE server (SDO, SDO info, emergencies),
                 fault plan, DC clock and SYNC0
    pdomap       a slave's PDO assignment/mapping objects, rewritable by SDO in PRE-OP
    esc, slave   one slave controller (registers, SII, SM, FMMU, DC, watchdog) and its application
    bus          a chain of ESCs: addressing and working counters
    sim          the simulator process: a raw socket on an interface (``softrt ecat-sim``)
"""
