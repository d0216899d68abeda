from perfbench.cli import main

main()
