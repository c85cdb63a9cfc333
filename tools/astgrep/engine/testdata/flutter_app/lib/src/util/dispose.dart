import 'package:flutter/foundation.dart';

/// Releases a notifier that may never have been created.
void dispose(ChangeNotifier? notifier) {
  notifier?.dispose();
}
