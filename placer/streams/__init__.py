"""What the reference's scheduler and placer's chunk model share about an exchange phase's streams: which transfers
depend on which (``dependencies``) and the heap that balances the waves of streams (``balance``, compiled in
``_balance``, which also holds the non-delay list of ``placer.refschedule.nondelay``). Both schedulers import this
package and neither imports the other (docs/ordering.md)."""
