from bench.compaction.run import main

main()
