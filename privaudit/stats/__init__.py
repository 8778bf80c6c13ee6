"""Pure statistics (numpy/scipy, no torch): attack scores → ε lower bounds with their assumptions, ceilings and power."""
