"""Access control: users, their selectors and rules (``users``), the security log (``log``)
and the ACL file (``aclfile``). Pure: the command table is seen through a ``Catalog``, time
comes in as arguments; the command layer (``commands/acl.py``) asks and answers."""
