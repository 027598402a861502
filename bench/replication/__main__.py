from bench.replication.run import main

main()
