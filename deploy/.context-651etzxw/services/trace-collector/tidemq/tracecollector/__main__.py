from tidemq.tracecollector.collector import main

if __name__ == "__main__":
    main()
