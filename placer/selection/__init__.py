"""Stage 4: choosing relays -- the production greedy rule and the CP-SAT model -- and the plan they produce."""
