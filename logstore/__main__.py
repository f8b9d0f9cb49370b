from logstore.cli import main

main()
