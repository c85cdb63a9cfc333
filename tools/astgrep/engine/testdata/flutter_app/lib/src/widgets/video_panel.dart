import 'package:flutter/material.dart';

import '../util/dispose.dart';

class VideoPanel extends StatefulWidget {
  const VideoPanel({super.key});

  @override
  State<VideoPanel> createState() => _VideoPanelState();
}

class _VideoPanelState extends State<VideoPanel> with SingleTickerProviderStateMixin {
  late final AnimationController controller = AnimationController(vsync: this);
  final ValueNotifier<bool> playing = ValueNotifier(false);
  final PageController? pages = null;

  void _stop() {
    dispose(playing);
  }

  @override
  void dispose() {
    dispose(controller);
    if (pages != null) pages.dispose();
    dispose(playing);
    super.dispose();
  }

  @override
  Widget build(BuildContext context) {
    return ValueListenableBuilder<bool>(
      valueListenable: playing,
      builder: (context, on, _) => Icon(on ? Icons.pause : Icons.play_arrow),
    );
  }
}
