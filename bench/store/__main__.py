from bench.store.run import main

main()
