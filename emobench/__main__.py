from emobench.cli import main

main()
