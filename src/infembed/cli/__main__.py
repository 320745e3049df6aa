from infembed.cli import main

main()
