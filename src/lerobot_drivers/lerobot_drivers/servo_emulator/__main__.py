import sys

from lerobot_drivers.servo_emulator.process import main

sys.exit(main())
