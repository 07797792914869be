from orion.cli import main

main()
